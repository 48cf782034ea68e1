# SPDX-License-Identifier: GPL-2.0
"""Parent domains (provider alloc_parent_domain, userspace/pd.h): a parent
domain stands for its protection domain in every verb that takes a PD
(QP, SRQ, MR, AH, and an extended CQ with IBV_CQ_INIT_ATTR_MASK_PD), RC
and UD traffic work through objects made with it. (That the protection
domain cannot be deallocated before its parent domains, and what
alloc_parent_domain refuses, is in the unit tests:
userspace/tests/parent_domain_test.cpp.)

srnic's rings are kernel memory mapped into the process and the provider
allocates no other per-object buffer, so the custom allocators are never
called: test_allocators_not_called pins that documented behaviour down.
"""
import errno
import time

import pytest

pytest.importorskip("pyverbs")
import verbs_enums as e  # noqa: E402
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute  # noqa: E402
from pyverbs.cq import CQ, CQEX, CqInitAttrEx, PollCqAttr  # noqa: E402
from pyverbs.device import Context  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.pd import (PD, ParentDomain, ParentDomainContext,  # noqa: E402
                        ParentDomainInitAttr)
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr  # noqa: E402
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr  # noqa: E402
from pyverbs.wr import SGE, RecvWR, SendWR  # noqa: E402

import rc_verbs  # noqa: E402

CALLS = []


def counting_alloc(pd, context, size, alignment, resource_type):
    CALLS.append(("alloc", size, resource_type))
    return e._IBV_ALLOCATOR_USE_DEFAULT


def counting_free(pd, context, ptr, resource_type):
    CALLS.append(("free", resource_type))
    return e._IBV_ALLOCATOR_USE_DEFAULT


@pytest.fixture
def ctx(roce_dev):
    with Context(name=roce_dev.name) as c:
        yield c


def parent_domain(ctx, pd, allocators=True):
    pd_ctx = ParentDomainContext(pd, counting_alloc, counting_free) \
        if allocators else None
    return ParentDomain(ctx, attr=ParentDomainInitAttr(pd=pd,
                                                       pd_context=pd_ctx))


def connect_rc(roce_dev, qps):
    """The two RC QPs of one device to RTS towards each other."""
    a, b = qps
    for qp in (a, b):
        attr = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
        attr.pkey_index = 0
        attr.qp_access_flags = rc_verbs.ACCESS_ALL
        qp.modify(attr, rc_verbs.INIT_MASK)
    for qp, peer in ((a, b), (b, a)):
        attr = QPAttr(qp_state=e.IBV_QPS_RTR)
        gr = GlobalRoute(dgid=GID(roce_dev.gid),
                         sgid_index=roce_dev.gid_index, hop_limit=64)
        attr.ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
        attr.path_mtu = e.IBV_MTU_1024
        attr.dest_qp_num = peer.qp_num
        attr.rq_psn = 0
        attr.max_dest_rd_atomic = 1
        attr.min_rnr_timer = 1
        qp.modify(attr, rc_verbs.RTR_MASK)
    for qp in (a, b):
        attr = QPAttr(qp_state=e.IBV_QPS_RTS)
        attr.timeout = 14
        attr.retry_cnt = 7
        attr.rnr_retry = 7
        attr.sq_psn = 0
        attr.max_rd_atomic = 1
        qp.modify(attr, rc_verbs.RTS_MASK)


def test_rc_traffic_through_parent_domain(ctx, roce_dev):
    """QPs, SRQ, MRs and an extended CQ made with the parent domain."""
    CALLS.clear()
    pd = PD(ctx)
    pdom = parent_domain(ctx, pd)
    cq = CQEX(ctx, CqInitAttrEx(
        cqe=64, wc_flags=e.IBV_WC_STANDARD_FLAGS, parent_domain=pdom,
        comp_mask=e.IBV_CQ_INIT_ATTR_MASK_FLAGS | e.IBV_CQ_INIT_ATTR_MASK_PD))
    srq = SRQ(pdom, SrqInitAttr(SrqAttr(max_wr=16, max_sge=1)))
    cap = QPCap(max_send_wr=8, max_recv_wr=0, max_send_sge=1,
                max_recv_sge=1)
    qps = [QP(pdom, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                               srq=srq, cap=cap)) for _ in range(2)]
    connect_rc(roce_dev, qps)
    src = MR(pdom, 256, rc_verbs.ACCESS_ALL)
    dst = MR(pdom, 256, rc_verbs.ACCESS_ALL)
    src.write(b"d" * 256, 256)
    for i in range(4):
        srq.post_recv(RecvWR(wr_id=100 + i, num_sge=1,
                             sg=[SGE(dst.buf, 256, dst.lkey)]))
    for i in range(4):
        qps[0].post_send(SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1,
                                sg=[SGE(src.buf, 256, src.lkey)]))
    seen = []
    for _ in range(8):
        deadline = time.monotonic() + rc_verbs.WC_TIMEOUT
        while cq.start_poll(PollCqAttr()) == errno.ENOENT:
            assert time.monotonic() < deadline, \
                f"completions missing; got {seen}"
            time.sleep(0.001)
        seen.append((cq.wr_id, cq.status))
        cq.end_poll()
    assert sorted(seen) == sorted([(i, e.IBV_WC_SUCCESS) for i in range(4)] +
                                  [(100 + i, e.IBV_WC_SUCCESS)
                                   for i in range(4)]), seen
    assert dst.read(256, 0) == b"d" * 256
    for obj in qps + [srq, src, dst, cq, pdom, pd]:
        obj.close()
    # Documented: nothing of srnic's is allocated through the allocators.
    assert CALLS == []


def test_ud_traffic_and_ah_through_parent_domain(ctx, roce_dev):
    pd = PD(ctx)
    pdom = parent_domain(ctx, pd)
    cq = CQ(ctx, 16, None, None, 0)
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1,
                max_recv_sge=1)
    qps = [QP(pdom, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq,
                               cap=cap)) for _ in range(2)]
    for qp in qps:
        attr = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
        attr.pkey_index = 0
        attr.qkey = 0x11
        qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX |
                  e.IBV_QP_PORT | e.IBV_QP_QKEY)
        qp.modify(QPAttr(qp_state=e.IBV_QPS_RTR), e.IBV_QP_STATE)
        attr = QPAttr(qp_state=e.IBV_QPS_RTS)
        attr.sq_psn = 0
        qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)
    mr = MR(pdom, 40 + 64, e.IBV_ACCESS_LOCAL_WRITE)
    mr.write(b"u" * 64, 64, 40)
    gr = GlobalRoute(dgid=GID(roce_dev.gid), sgid_index=roce_dev.gid_index,
                     hop_limit=64)
    ah = AH(pdom, attr=AHAttr(gr=gr, is_global=1, port_num=1))
    qps[1].post_recv(RecvWR(wr_id=9, num_sge=1,
                            sg=[SGE(mr.buf, 40 + 64, mr.lkey)]))
    wr = SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1,
                sg=[SGE(mr.buf + 40, 64, mr.lkey)])
    wr.set_wr_ud(ah, qps[1].qp_num, 0x11)
    qps[0].post_send(wr)
    wcs = rc_verbs.poll_cq(cq, 2)
    assert sorted((w.wr_id, w.status) for w in wcs) == \
        [(1, e.IBV_WC_SUCCESS), (9, e.IBV_WC_SUCCESS)]
    for obj in qps + [ah, mr, cq, pdom, pd]:
        obj.close()


def test_parent_domain_without_allocators(ctx):
    pd = PD(ctx)
    pdom = parent_domain(ctx, pd, allocators=False)
    mr = MR(pdom, 64, e.IBV_ACCESS_LOCAL_WRITE)
    assert mr.lkey
    mr.close()
    pdom.close()
    pd.close()


# IBV_CQ_INIT_ATTR_MASK_PD with a plain PD (EINVAL) is checked by the unit
# test CqExCreate.ParentDomainMustBeOneOfThisContext: pyverbs' CQEX treats
# the PD as a ParentDomain before it looks at the result.


def test_many_parent_domains_over_one_pd(ctx):
    pd = PD(ctx)
    doms = [parent_domain(ctx, pd) for _ in range(8)]
    mrs = [MR(d, 64, e.IBV_ACCESS_LOCAL_WRITE) for d in doms]
    assert len({m.lkey for m in mrs}) == 8
    for m in mrs:
        m.close()
    for d in doms:
        d.close()
    pd.close()
