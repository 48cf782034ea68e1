# SPDX-License-Identifier: GPL-2.0
"""ibv_resize_cq through the provider (kernel srnic_resize_cq(): a new
ring replaces the old one and the completions not yet polled move to it).

Completions come from flushing receive WQEs: an RC QP in INIT gets
receives posted, then moves to the error state, and every receive
completes with IBV_WC_WR_FLUSH_ERR, in order, carrying its wr_id, before
the modify returns. Posting to a QP already in the error state flushes the
new WQE at once (through the doorbell): its completion is on the ring when
the post returns, so a resize right after it counts it.
"""
import errno
import select
import subprocess

import pytest

pytest.importorskip("pyverbs")
import verbs_enums as e  # noqa: E402
from pyverbs.cq import CQ, CompChannel  # noqa: E402
from pyverbs.device import Context  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr  # noqa: E402
from pyverbs.wr import SGE, RecvWR  # noqa: E402

import rc_verbs  # noqa: E402

FLUSH = e.IBV_WC_WR_FLUSH_ERR


class Flusher:
    """A CQ and an RC QP whose flushed receives complete on it."""

    def __init__(self, ctx, cqe, max_recv_wr=64, channel=None):
        self.pd = PD(ctx)
        self.cq = CQ(ctx, cqe, None, channel, 0)
        self.qp = QP(self.pd, QPInitAttr(
            qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq,
            cap=QPCap(max_send_wr=1, max_recv_wr=max_recv_wr,
                      max_send_sge=1, max_recv_sge=1)))
        self.qp.to_init(QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1))
        self.in_error = False

    def post(self, wr_ids):
        for wr_id in wr_ids:
            self.qp.post_recv(RecvWR(wr_id=wr_id, num_sge=1,
                                     sg=[SGE(0x1000, 64, 0)]))

    def flush(self, wr_ids):
        """One flush completion per wr_id, in order (not polled here)."""
        self.post(wr_ids)
        if not self.in_error:
            self.qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
            self.in_error = True

    def poll(self, n):
        wcs = rc_verbs.poll_cq(self.cq, n, what="flush completions")
        assert all(w.status == FLUSH for w in wcs), \
            [rc_verbs.wc_text(w) for w in wcs]
        return [w.wr_id for w in wcs]

    def assert_empty(self):
        n, _ = self.cq.poll(1)
        assert n == 0


@pytest.fixture
def ctx(roce_dev):
    with Context(name=roce_dev.name) as c:
        yield c


def test_resize_empty_grow_and_shrink(ctx):
    cq = CQ(ctx, 3, None, None, 0)
    for size in (1, 7, 100, 4, 1000, 2):
        cq.resize(size)
        assert cq.cqe >= size, (size, cq.cqe)
    n, _ = cq.poll(4)
    assert n == 0
    cq.close()


def test_resize_bad_sizes(ctx):
    max_cqe = ctx.query_device().max_cqe
    cq = CQ(ctx, 8, None, None, 0)
    before = cq.cqe
    for size in (0, -1, max_cqe + 1):
        with pytest.raises(PyverbsRDMAError) as ex:
            cq.resize(size)
        assert ex.value.error_code == errno.EINVAL, size
    assert cq.cqe == before
    cq.resize(max_cqe)
    assert cq.cqe >= max_cqe
    cq.close()


def test_unpolled_completions_survive_grow(ctx):
    f = Flusher(ctx, 7)
    f.flush(range(6))
    assert f.poll(2) == [0, 1]
    f.cq.resize(200)
    assert f.cq.cqe >= 200
    assert f.poll(4) == [2, 3, 4, 5]
    f.assert_empty()


def test_unpolled_completions_survive_shrink(ctx):
    f = Flusher(ctx, 60)
    f.flush(range(10, 15))
    f.cq.resize(5)
    assert 5 <= f.cq.cqe < 60
    assert f.poll(5) == [10, 11, 12, 13, 14]
    f.assert_empty()


def test_shrink_below_unpolled_is_einval_and_keeps_them(ctx):
    """rdma-core's test_resize_cq: fewer entries than completions
    waiting fails with EINVAL, and the CQ is as it was."""
    f = Flusher(ctx, 15)
    f.flush(range(6))  # flushed synchronously: all six are on the ring
    for _ in range(2):
        with pytest.raises(PyverbsRDMAError) as ex:
            f.cq.resize(5)
        assert ex.value.error_code == errno.EINVAL
        assert f.cq.cqe == 15
    assert f.poll(6) == list(range(6))
    f.cq.resize(1)
    assert f.cq.cqe >= 1


def test_completions_after_resize_wrap_the_new_ring(ctx):
    """The kernel writes to the new ring (phases right across laps), and
    the provider reads it."""
    f = Flusher(ctx, 1, max_recv_wr=8)
    f.flush([0])
    f.cq.resize(3)  # 4 slots, one holding wr_id 0
    got = f.poll(1)
    next_id = 1
    for _ in range(10):  # 10 laps of a 4-slot ring, 3 at a time
        ids = list(range(next_id, next_id + 3))
        f.flush(ids)
        got += f.poll(3)
        next_id += 3
    assert got == list(range(next_id))
    f.assert_empty()


def test_repeated_resizes_with_pending_completions(ctx):
    f = Flusher(ctx, 2, max_recv_wr=16)
    expected = []
    next_id = 0
    # Each size holds what is pending now and the two the next round adds.
    for size in (3, 9, 7, 31, 12, 15):
        ids = list(range(next_id, next_id + 2))
        f.flush(ids)
        expected += ids
        next_id += 2
        f.cq.resize(size)
        assert f.cq.cqe >= size
    got = f.poll(len(expected))
    assert got == expected
    f.assert_empty()


def test_arm_survives_resize(ctx):
    """A CQ armed before the resize raises its event for a completion on
    the new ring."""
    channel, fd = rc_verbs.comp_channel_fd(lambda: CompChannel(ctx))
    f = Flusher(ctx, 4, channel=channel)
    f.cq.req_notify()
    f.cq.resize(40)
    f.flush([77])
    ready, _, _ = select.select([fd], [], [], rc_verbs.WC_TIMEOUT)
    assert ready, "no completion event after resize"
    channel.get_cq_event(f.cq)
    f.cq.ack_events(1)
    assert f.poll(1) == [77]


# Resizing from another process's view: the old ring is unmapped, so a
# stale pointer would fault; run in a child so a crash fails one test.
CHILD = r"""
import sys
import os, sys  # noqa: E401
sys.path.insert(0, os.path.join(os.environ["SRNIC_REPO"], "tests"))
import verbs_enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR

ctx = Context(name=sys.argv[1])
pd = PD(ctx)
cq = CQ(ctx, 2, None, None, 0)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                       cap=QPCap(max_send_wr=1, max_recv_wr=64,
                                 max_send_sge=1, max_recv_sge=1)))
qp.to_init(QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1))
qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
ids = []
for i in range(200):
    qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(0x1000, 64, 0)]))
    if i % 2:
        cq.resize(2 + (i * 7) % 13)
        n, wcs = cq.poll(8)
        ids += [w.wr_id for w in wcs]
while len(ids) < 200:
    n, wcs = cq.poll(8)
    ids += [w.wr_id for w in wcs]
print("IDS", ids == list(range(200)), flush=True)
"""


def test_resize_storm_in_child(roce_dev):
    p = subprocess.run(["/usr/bin/python3", "-c", CHILD, roce_dev.name],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "IDS True" in p.stdout, p.stdout
