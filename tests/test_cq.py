# SPDX-License-Identifier: GPL-2.0
"""Completion queues through the provider: sizes and limits, completion
vectors, the completion channel (arming in shared memory, events raised by
the kernel), and overrun reported as IBV_EVENT_CQ_ERR.

Completions are produced by flushing a QP moved to the error state, the
only producer until the NIC engine exists.
"""
import errno
import subprocess

import pytest

pytest.importorskip("pyverbs")
import verbs_enums as e  # noqa: E402
from pyverbs.cq import CQ, CompChannel  # noqa: E402
from pyverbs.device import Context  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402


@pytest.fixture
def ctx(roce_dev):
    with Context(name=roce_dev.name) as c:
        yield c


def test_create_sizes(ctx):
    attr = ctx.query_device()
    assert attr.max_cq > 0 and attr.max_cqe > 0
    for size in (1, 2, 3, 63, 64, 65, 1000, attr.max_cqe // 2, attr.max_cqe):
        cq = CQ(ctx, size, None, None, 0)
        assert cq.cqe >= size, (size, cq.cqe)
        cq.close()


def test_many_cqs(ctx):
    cqs = [CQ(ctx, 16, None, None, 0) for _ in range(64)]
    for cq in cqs:
        cq.close()


def test_create_too_large(ctx):
    attr = ctx.query_device()
    with pytest.raises(PyverbsRDMAError) as ex:
        CQ(ctx, attr.max_cqe + 1, None, None, 0)
    assert ex.value.error_code == errno.EINVAL


def test_comp_vectors(ctx):
    for vector in range(ctx.num_comp_vectors):
        CQ(ctx, 8, None, None, vector).close()
    with pytest.raises(PyverbsRDMAError) as ex:
        CQ(ctx, 8, None, None, ctx.num_comp_vectors + 1)
    assert ex.value.error_code == errno.EINVAL


def test_poll_empty(ctx):
    cq = CQ(ctx, 8, None, None, 0)
    npolled, wcs = cq.poll(4)
    assert npolled == 0
    cq.req_notify()
    cq.req_notify(True)
    cq.close()


# Runs in a child so that a missing event fails by timeout, not by hanging.
EVENT_SCRIPT = r"""
import sys
import os, sys  # noqa: E401
sys.path.insert(0, os.path.join(os.environ["SRNIC_REPO"], "tests"))
import verbs_enums as e
from pyverbs.cq import CQ, CompChannel
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR

solicited = sys.argv[2] == "solicited"
ctx = Context(name=sys.argv[1])
pd = PD(ctx)
cc = CompChannel(ctx)
cq = CQ(ctx, 16, None, cc, 0)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                       cap=QPCap(max_send_wr=4, max_recv_wr=4,
                                 max_send_sge=1, max_recv_sge=1)))
qp.to_init(QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1))
for i in range(2):
    qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(0x1000, 64, 0)]))
for round in range(2):
    cq.req_notify(solicited)
    if round == 0:
        qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
    else:
        # Posting to a QP in the error state: flushed through the doorbell.
        qp.post_recv(RecvWR(wr_id=7, num_sge=1, sg=[SGE(0x1000, 64, 0)]))
    cc.get_cq_event(cq)
    cq.ack_events(1)
    n, wcs = cq.poll(8)
    # int(): newer pyverbs (rdma-core 56) returns the status as an enum.
    print("EVENT", n, [(w.wr_id, int(w.status)) for w in wcs], flush=True)
"""


@pytest.mark.parametrize("mode", ["next", "solicited"])
def test_completion_channel_event(roce_dev, mode):
    """Arm (no syscall), produce flush completions, get the event; twice."""
    p = subprocess.run(["/usr/bin/python3", "-c", EVENT_SCRIPT,
                        roce_dev.name, mode],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [l for l in p.stdout.splitlines() if l.startswith("EVENT")]
    assert len(lines) == 2, p.stdout
    flush = int(e.IBV_WC_WR_FLUSH_ERR)
    assert lines[0] == f"EVENT 2 [(0, {flush}), (1, {flush})]"
    assert lines[1] == f"EVENT 1 [(7, {flush})]"


OVERRUN_SCRIPT = r"""
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
cq = CQ(ctx, 1, None, None, 0)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                       cap=QPCap(max_send_wr=1, max_recv_wr=8,
                                 max_send_sge=1, max_recv_sge=1)))
qp.to_init(QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1))
for i in range(8):
    qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(0x1000, 64, 0)]))
qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
event = ctx.get_async_event()
print("ASYNC", event.event_type, flush=True)
event.ack()
n, wcs = cq.poll(8)
print("POLLED", n, flush=True)
"""


def test_overrun_reports_cq_err(roce_dev):
    """More completions than the CQ holds: IBV_EVENT_CQ_ERR, no corruption."""
    p = subprocess.run(["/usr/bin/python3", "-c", OVERRUN_SCRIPT,
                        roce_dev.name],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"ASYNC {e.IBV_EVENT_CQ_ERR}" in p.stdout, p.stdout
    # The CQ (cqe = 1) has two slots; the overrun stops after them.
    assert "POLLED 2" in p.stdout, p.stdout
