# SPDX-License-Identifier: GPL-2.0
"""RC queue pairs through the provider: creation and capabilities, the
IBTA state machine (every transition, legal or not), query_qp, the post
checks the provider makes on its mapped rings (state, SGEs, inline size,
full rings), and flushing with IBV_WC_WR_FLUSH_ERR in the error state.

Tests that need posted WQEs to stay in the rings post in SQD, where the
NIC engine starts no new WQE; traffic itself is tests/test_rc_local.py's.
"""
import errno
import itertools

import pytest

pytest.importorskip("pyverbs")
import verbs_enums as e  # noqa: E402
from conftest import module_roce_device  # noqa: E402
from pyverbs.addr import AHAttr, GID, GlobalRoute  # noqa: E402
from pyverbs.cq import CQ  # noqa: E402
from pyverbs.device import Context  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr  # noqa: E402
from pyverbs.wr import SGE, RecvWR, SendWR  # noqa: E402

from rc_verbs import (  # noqa: E402
    ACCESS_ALL as ACCESS, ERR, INIT, INIT_MASK, RESET, RTR, RTR_MASK, RTS,
    RTS_MASK, SQD, SQE)

STATES = (RESET, INIT, RTR, RTS, SQD, SQE, ERR)

# The RC transitions ib_modify_qp_is_ok() allows a consumer (IBTA's, less
# RESET -> ERR, which Linux refuses).
LEGAL = {
    (RESET, RESET), (RESET, INIT),
    (INIT, RESET), (INIT, INIT), (INIT, RTR), (INIT, ERR),
    (RTR, RESET), (RTR, RTS), (RTR, ERR),
    (RTS, RESET), (RTS, RTS), (RTS, SQD), (RTS, ERR),
    (SQD, RESET), (SQD, RTS), (SQD, SQD), (SQD, ERR),
    (ERR, RESET), (ERR, ERR),
}


class Env:
    def __init__(self, dev):
        self.dev = dev
        self.ctx = Context(name=dev.name)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 256, None, None, 0)
        self.attr = self.ctx.query_device()

    def qp(self, max_send_wr=8, max_recv_wr=8, max_send_sge=2,
           max_recv_sge=2, max_inline_data=0, sq_sig_all=0,
           qp_type=e.IBV_QPT_RC):
        cap = QPCap(max_send_wr=max_send_wr, max_recv_wr=max_recv_wr,
                    max_send_sge=max_send_sge, max_recv_sge=max_recv_sge,
                    max_inline_data=max_inline_data)
        init = QPInitAttr(qp_type=qp_type, scq=self.cq, rcq=self.cq,
                          cap=cap, sq_sig_all=sq_sig_all)
        return QP(self.pd, init)

    def attrs_for(self, qp, target):
        """(QPAttr, mask) for a move to target, whatever the source."""
        a = QPAttr(qp_state=target, cur_qp_state=RESET)
        if target == INIT:
            a.pkey_index = 0
            a.port_num = 1
            a.qp_access_flags = ACCESS
            return a, INIT_MASK
        if target == RTR:
            gr = GlobalRoute(dgid=GID(self.dev.gid),
                             sgid_index=self.dev.gid_index)
            a.ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
            a.path_mtu = e.IBV_MTU_1024
            a.dest_qp_num = qp.qp_num  # itself: a loop, no peer needed
            a.rq_psn = 0x123456
            a.max_dest_rd_atomic = 4
            a.min_rnr_timer = 12
            return a, RTR_MASK
        if target == RTS and qp.qp_state == RTR:
            a.timeout = 14
            a.retry_cnt = 7
            a.rnr_retry = 6
            a.sq_psn = 0x654321
            a.max_rd_atomic = 2
            return a, RTS_MASK
        return a, e.IBV_QP_STATE

    def move(self, qp, target):
        a, mask = self.attrs_for(qp, target)
        qp.modify(a, mask)

    def walk(self, qp, state):
        """Drive a fresh QP from RESET to state through legal moves."""
        path = {RESET: [], INIT: [INIT], RTR: [INIT, RTR],
                RTS: [INIT, RTR, RTS], SQD: [INIT, RTR, RTS, SQD],
                ERR: [INIT, ERR]}[state]
        for s in path:
            self.move(qp, s)

    def drain(self):
        wcs = []
        while True:
            n, batch = self.cq.poll(64)
            if not n:
                return wcs
            wcs.extend(batch)


@pytest.fixture
def env(roce_dev):
    env = Env(roce_dev)
    yield env
    # Before the device goes: closing the context closes what it holds.
    env.ctx.close()


def sge():
    return SGE(0x1000, 64, 0)


def send_wr(wr_id, opcode=e.IBV_WR_SEND, num_sge=1, flags=0, sgl=None):
    sgl = sgl if sgl is not None else [sge() for _ in range(num_sge)]
    return SendWR(wr_id=wr_id, opcode=opcode, num_sge=len(sgl), sg=sgl,
                  send_flags=flags)


def recv_wr(wr_id, num_sge=1):
    return RecvWR(wr_id=wr_id, num_sge=num_sge,
                  sg=[sge() for _ in range(num_sge)])


def expect_errno(code, fn, *args):
    with pytest.raises(PyverbsRDMAError) as ex:
        fn(*args)
    assert ex.value.error_code == code, ex.value


# ---- creation -------------------------------------------------------------

def test_device_limits(env):
    a = env.attr
    assert a.max_qp > 0 and a.max_qp_wr > 0
    assert a.max_sge > 0 and a.max_sge_rd > 0


def test_create_destroy_with_caps(env):
    for wr, sge_n, inline in ((1, 1, 0), (7, 2, 32), (64, 4, 64),
                              (env.attr.max_qp_wr, env.attr.max_sge, 0)):
        qp = env.qp(max_send_wr=wr, max_recv_wr=wr, max_send_sge=sge_n,
                    max_recv_sge=sge_n, max_inline_data=inline)
        assert qp.qp_num > 1
        assert qp.qp_state == RESET
        _, init = qp.query(e.IBV_QP_CAP)
        assert init.cap.max_send_wr >= wr and init.cap.max_recv_wr >= wr
        assert init.cap.max_send_sge >= sge_n
        assert init.cap.max_recv_sge >= sge_n
        assert init.cap.max_inline_data >= inline
        qp.close()


def test_qp_numbers_unique(env):
    qps = [env.qp() for _ in range(32)]
    nums = {qp.qp_num for qp in qps}
    assert len(nums) == 32 and min(nums) >= 2
    for qp in qps:
        qp.close()


@pytest.mark.parametrize("field", ["max_send_wr", "max_recv_wr",
                                   "max_send_sge", "max_recv_sge",
                                   "max_inline_data"])
def test_create_invalid_caps(env, field):
    limit = {"max_send_wr": env.attr.max_qp_wr,
             "max_recv_wr": env.attr.max_qp_wr,
             "max_send_sge": env.attr.max_sge,
             "max_recv_sge": env.attr.max_sge,
             "max_inline_data": 4096}[field]
    with pytest.raises(PyverbsRDMAError) as ex:
        env.qp(**{field: limit + 1})
    assert ex.value.error_code == errno.EINVAL


# Raw packet QPs are tests/test_raw_packet.py's; a driver-defined type
# (mlx5's DC) srnic has none of.
@pytest.mark.parametrize("qp_type", [e.IBV_QPT_DRIVER])
def test_other_types_unsupported(env, qp_type):
    with pytest.raises(PyverbsRDMAError) as ex:
        env.qp(qp_type=qp_type)
    assert ex.value.error_code == errno.EOPNOTSUPP


# ---- state machine --------------------------------------------------------

@pytest.fixture(scope="module")
def machine_env():
    """One device for every transition below (each test makes and closes
    its own QP): a device per test took most of their time. srnic9 on its
    own veth and subnet, beside the other tests' srnic0."""
    with module_roce_device("srnic9", "198.18.9.1") as dev:
        env = Env(dev)
        yield env
        env.ctx.close()


@pytest.mark.parametrize("src,dst", list(itertools.product(
    (RESET, INIT, RTR, RTS, SQD, ERR), STATES)))
def test_transition(machine_env, src, dst):
    env = machine_env
    qp = env.qp()
    env.walk(qp, src)
    a, mask = env.attrs_for(qp, dst)
    if (src, dst) in LEGAL:
        qp.modify(a, mask)
        attr, _ = qp.query(e.IBV_QP_STATE)
        assert attr.qp_state == dst
    else:
        with pytest.raises(PyverbsRDMAError) as ex:
            qp.modify(a, mask)
        assert ex.value.error_code == errno.EINVAL
        attr, _ = qp.query(e.IBV_QP_STATE)
        assert attr.qp_state == src
    qp.close()


def test_missing_required_attribute(env):
    qp = env.qp()
    a, mask = env.attrs_for(qp, INIT)
    expect_errno(errno.EINVAL, qp.modify, a, mask & ~e.IBV_QP_PORT)
    qp.modify(a, mask)
    a, mask = env.attrs_for(qp, RTR)
    expect_errno(errno.EINVAL, qp.modify, a, mask & ~e.IBV_QP_DEST_QPN)
    # A valid transition with an attribute RC does not have.
    a.qkey = 5
    expect_errno(errno.EINVAL, qp.modify, a, mask | e.IBV_QP_QKEY)


def test_bad_attribute_values(env):
    qp = env.qp()
    a, mask = env.attrs_for(qp, INIT)
    a.pkey_index = 1  # one-entry P_Key table
    expect_errno(errno.EINVAL, qp.modify, a, mask)
    a.pkey_index = 0
    qp.modify(a, mask)
    a, mask = env.attrs_for(qp, RTR)
    a.max_dest_rd_atomic = 255
    expect_errno(errno.EINVAL, qp.modify, a, mask)


def test_query_returns_what_was_set(env):
    qp = env.qp(max_send_wr=16, max_recv_wr=32, max_send_sge=3,
                max_recv_sge=2, max_inline_data=48, sq_sig_all=1)
    env.walk(qp, RTS)
    attr, init = qp.query(0x1fffff)
    assert attr.qp_state == RTS
    assert attr.pkey_index == 0
    assert attr.port_num == 1
    assert attr.qp_access_flags == ACCESS
    assert attr.path_mtu == e.IBV_MTU_1024
    assert attr.dest_qp_num == qp.qp_num
    assert attr.rq_psn == 0x123456
    assert attr.max_dest_rd_atomic == 4
    assert attr.min_rnr_timer == 12
    assert attr.timeout == 14
    assert attr.retry_cnt == 7
    assert attr.rnr_retry == 6
    assert attr.sq_psn == 0x654321
    assert attr.max_rd_atomic == 2
    assert attr.ah_attr.sgid_index == env.dev.gid_index
    assert attr.ah_attr.is_global
    assert str(attr.ah_attr.dgid) == env.dev.gid
    assert init.qp_type == e.IBV_QPT_RC
    assert init.sq_sig_all == 1
    assert init.cap.max_send_wr >= 16 and init.cap.max_recv_wr >= 32
    assert init.cap.max_send_sge >= 3 and init.cap.max_recv_sge >= 2
    assert init.cap.max_inline_data >= 48


# ---- posting ---------------------------------------------------------------

def test_post_send_needs_rts(env):
    qp = env.qp()
    for state in (RESET, INIT, RTR):
        if state != RESET:
            env.move(qp, state)
        expect_errno(errno.EINVAL, qp.post_send, send_wr(1))


def test_post_recv_in_reset(env):
    qp = env.qp()
    expect_errno(errno.EINVAL, qp.post_recv, recv_wr(1))
    env.move(qp, INIT)
    qp.post_recv(recv_wr(1))


def test_recv_overflow(env):
    qp = env.qp(max_recv_wr=4)
    _, init = qp.query(e.IBV_QP_CAP)
    env.move(qp, INIT)
    for i in range(init.cap.max_recv_wr):
        qp.post_recv(recv_wr(i))
    expect_errno(errno.ENOMEM, qp.post_recv, recv_wr(99))


def test_send_overflow(env):
    qp = env.qp(max_send_wr=4)
    _, init = qp.query(e.IBV_QP_CAP)
    # In SQD posts are accepted but the engine starts none: the ring fills.
    env.walk(qp, SQD)
    for i in range(init.cap.max_send_wr):
        qp.post_send(send_wr(i, flags=e.IBV_SEND_SIGNALED))
    expect_errno(errno.ENOMEM, qp.post_send, send_wr(99))


def test_too_many_sges(env):
    qp = env.qp(max_send_sge=1, max_recv_sge=1)
    _, init = qp.query(e.IBV_QP_CAP)
    env.walk(qp, RTS)
    expect_errno(errno.EINVAL, qp.post_recv,
                 recv_wr(1, num_sge=init.cap.max_recv_sge + 1))
    expect_errno(errno.EINVAL, qp.post_send,
                 send_wr(1, num_sge=init.cap.max_send_sge + 1))


def test_inline_too_long(env):
    qp = env.qp(max_inline_data=32)
    _, init = qp.query(e.IBV_QP_CAP)
    env.walk(qp, RTS)
    too_long = SGE(0x1000, init.cap.max_inline_data + 1, 0)
    expect_errno(errno.EINVAL, qp.post_send,
                 send_wr(1, flags=e.IBV_SEND_INLINE, sgl=[too_long]))


def test_unsupported_opcode(env):
    """TSO is not implemented on RC; a window bind needs a window (binds
    are tested in test_mw.py, atomics' SGE checks in test_rc_atomic.py)."""
    qp = env.qp()
    env.walk(qp, RTS)
    expect_errno(errno.EINVAL, qp.post_send, send_wr(1, opcode=e.IBV_WR_TSO))
    wr = send_wr(1, opcode=e.IBV_WR_BIND_MW)
    expect_errno(errno.EINVAL, qp.post_send, wr)


def test_error_state_flushes(env):
    """WRs posted before and after the move to ERR complete with
    IBV_WC_WR_FLUSH_ERR, unsignaled sends included, in order."""
    qp = env.qp(max_send_wr=8, max_recv_wr=8)
    env.walk(qp, SQD)
    for i in range(3):
        qp.post_recv(recv_wr(100 + i))
    qp.post_send(send_wr(1, flags=e.IBV_SEND_SIGNALED))
    qp.post_send(send_wr(2, opcode=e.IBV_WR_RDMA_WRITE))
    qp.post_send(send_wr(3, opcode=e.IBV_WR_RDMA_READ,
                         flags=e.IBV_SEND_SIGNALED))
    assert env.drain() == []  # SQD: the engine starts no new WQE

    env.move(qp, ERR)
    wcs = env.drain()
    got = [(w.wr_id, w.opcode, w.status, w.qp_num) for w in wcs]
    flush = e.IBV_WC_WR_FLUSH_ERR
    assert got == [(1, e.IBV_WC_SEND, flush, qp.qp_num),
                   (2, e.IBV_WC_RDMA_WRITE, flush, qp.qp_num),
                   (3, e.IBV_WC_RDMA_READ, flush, qp.qp_num),
                   (100, e.IBV_WC_RECV, flush, qp.qp_num),
                   (101, e.IBV_WC_RECV, flush, qp.qp_num),
                   (102, e.IBV_WC_RECV, flush, qp.qp_num)]

    # Posting in the error state: flushed through the doorbell.
    qp.post_send(send_wr(4))
    qp.post_recv(recv_wr(104))
    got = [(w.wr_id, w.status) for w in env.drain()]
    assert got == [(4, flush), (104, flush)]

    # The rings were handed back: a full ring's worth posts again.
    _, init = qp.query(e.IBV_QP_CAP)
    for i in range(init.cap.max_send_wr):
        qp.post_send(send_wr(200 + i))
    assert len(env.drain()) == init.cap.max_send_wr


def test_reset_discards_and_reuses(env):
    qp = env.qp(max_recv_wr=4)
    env.move(qp, INIT)
    for i in range(4):
        qp.post_recv(recv_wr(i))
    env.move(qp, RESET)
    env.walk(qp, RTS)
    _, init = qp.query(e.IBV_QP_CAP)
    for i in range(init.cap.max_recv_wr):
        qp.post_recv(recv_wr(10 + i))
    env.move(qp, ERR)
    got = [w.wr_id for w in env.drain()]
    assert got == [10 + i for i in range(init.cap.max_recv_wr)]


def test_destroy_with_posted_work(env):
    qp = env.qp()
    env.walk(qp, RTS)
    qp.post_send(send_wr(1))
    qp.post_recv(recv_wr(2))
    qp.close()
    env.cq.close()


def test_cur_state_must_match(env):
    qp = env.qp()
    env.walk(qp, RTS)
    # RTS -> RTS is a transition that accepts IBV_QP_CUR_STATE.
    a = QPAttr(qp_state=RTS, cur_qp_state=SQD)  # it is in RTS
    mask = e.IBV_QP_STATE | e.IBV_QP_CUR_STATE
    expect_errno(errno.EINVAL, qp.modify, a, mask)
    a.cur_qp_state = RTS
    qp.modify(a, mask)


SQD_SCRIPT = r"""
import sys
from types import SimpleNamespace
sys.path.insert(0, sys.argv[1])
import os, sys  # noqa: E401
sys.path.insert(0, os.path.join(os.environ["SRNIC_REPO"], "tests"))
import verbs_enums as e
from pyverbs.qp import QPAttr
from test_qp import Env, RTS, SQD

dev = SimpleNamespace(name=sys.argv[2], gid=sys.argv[3],
                      gid_index=int(sys.argv[4]))
env = Env(dev)
qp = env.qp()
env.walk(qp, RTS)
a = QPAttr(qp_state=SQD)
a.en_sqd_async_notify = 1
qp.modify(a,
          e.IBV_QP_STATE | e.IBV_QP_EN_SQD_ASYNC_NOTIFY)
event = env.ctx.get_async_event()
print("ASYNC", event.event_type, flush=True)
event.ack()
"""


def test_sqd_drained_event(roce_dev):
    import os
    import subprocess
    # A fresh python3 importing pyverbs and this module, then the walk to
    # SQD: seconds normally, minutes under KASAN and TCG, so the bound is
    # SRNIC_TEST_TOOL_TIMEOUT's (scripts/debug-kernel.sh raises it).
    timeout = float(os.environ.get("SRNIC_TEST_TOOL_TIMEOUT", "60"))
    p = subprocess.run(["/usr/bin/python3", "-c", SQD_SCRIPT,
                        os.path.dirname(os.path.abspath(__file__)),
                        roce_dev.name, roce_dev.gid,
                        str(roce_dev.gid_index)],
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"ASYNC {e.IBV_EVENT_SQ_DRAINED}" in p.stdout, p.stdout
